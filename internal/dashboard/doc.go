// Package dashboard is sendonce's web dashboard (docs/api.md, "The dashboard"):
// server-rendered html/template pages, assets embedded in the binary, and a
// little progressive JavaScript (live lists over server-sent events, copy
// buttons, the template preview). Every page works without the script.
//
// A page is one template in templates/, one handler and one row of the
// route table (routes.go); a row of the nav table puts it in the menu.
// Sign-in is with an API key; the session lives in the database
// (Sessions) so that every API process of a deployment honours it. Reads
// go through Reads, a read-only view of the store, with the key's tenant;
// every change goes through app.Service or webhook.Service, which own its
// transaction and its rules (a key made here is held to its creator's
// limits by app.Service.CreateKeyBy, as everywhere). The dashboard holds
// no store and opens no transaction.
package dashboard
