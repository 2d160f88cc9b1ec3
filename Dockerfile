# syntax=docker/dockerfile:1
# sendonce's container image: one static binary, the CA roots and an empty
# data volume on an empty base, run as an unprivileged user.
# Build: docker build --build-arg VERSION=$(git describe --tags --always) -t sendonce .
# docs/operations.md ("Docker and compose") says how to run it, and what of
# this file the tests check on a machine without a container engine.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first: a change in the code alone reuses this layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION names the build in `sendonce version` and /healthz (the image
# has no git checkout to stamp the commit from).
ARG VERSION=""
# CGO_ENABLED=0: the SQLite driver is pure Go, so the binary needs no libc
# and runs on an empty base.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/sendonce/sendonce/internal/cli.Version=${VERSION}" -o /out/sendonce ./cmd/sendonce
# What the empty base lacks: a /tmp the user may write (SQLite's temporary
# files) and the data directory, owned by the user that runs sendonce.
RUN mkdir -p /out/tmp /out/data && chmod 1777 /out/tmp

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/tmp /tmp
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/sendonce /usr/local/bin/sendonce
# Every setting is also a variable (README's table); these suit a container:
# listen on every address, keep the SQLite database in the volume, log JSON.
ENV SENDONCE_ADDR=0.0.0.0:8787 \
    SENDONCE_DB=sqlite:/data/sendonce.db \
    SENDONCE_LOG_FORMAT=json
# 65532: no name is needed (the base has no /etc/passwd), and it is not root.
USER 65532:65532
WORKDIR /data
VOLUME /data
# 8787: HTTP API, dashboard, /healthz, /readyz and /metrics. 2525: SMTP
# submission (--smtp-addr 0.0.0.0:2525). 2526: the inbound MX listener
# (--inbound-addr 0.0.0.0:2526): publish it as port 25 (docker run -p 25:2526),
# so the process needs no privilege to bind it.
EXPOSE 8787 2525 2526
# A worker (--role worker) serves no HTTP: its container sets no health check
# (compose: healthcheck: disable: true).
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/bin/sendonce", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/sendonce"]
CMD ["serve"]
