package client

import (
	"context"
	"net/http"
)

func templatePath(id string) (string, error) {
	return idPath("/v1/templates/", "template id", id, "")
}

// PutTemplate creates or replaces a template (PUT /v1/templates/{id}); a PUT
// is idempotent by nature, so it is retried like a GET. Needs the admin
// scope. Errors: 422 validation_error.
func (c *Client) PutTemplate(ctx context.Context, id string, p *TemplateParams) (*Template, error) {
	path, err := templatePath(id)
	if err != nil {
		return nil, err
	}
	t, resp, err := callWith[Template](ctx, c, http.MethodPut, path, p)
	if err != nil {
		return nil, err
	}
	t.Created = resp.status == http.StatusCreated
	return t, nil
}

// GetTemplate returns a template. Errors: 404 not_found.
func (c *Client) GetTemplate(ctx context.Context, id string) (*Template, error) {
	path, err := templatePath(id)
	if err != nil {
		return nil, err
	}
	return get[Template](ctx, c, path, nil)
}

// ListTemplates returns every template of the key's tenant.
func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	l, err := get[List[Template]](ctx, c, "/v1/templates", nil)
	if err != nil {
		return nil, err
	}
	return l.Data, nil
}

// DeleteTemplate deletes a template. Needs the admin scope. Errors: 404
// not_found (also on a retry whose first attempt deleted it but lost the
// answer; treat IsNotFound after a retried call as done).
func (c *Client) DeleteTemplate(ctx context.Context, id string) error {
	path, err := templatePath(id)
	if err != nil {
		return err
	}
	_, err = c.call(ctx, request{method: http.MethodDelete, path: path}, nil)
	return err
}
