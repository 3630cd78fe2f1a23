// Package apiclient is the REST API's client, generated from proto/openapi.yaml by
// oapi-codegen (client.gen.go; `make generate`, configuration oapi-codegen.yaml): one
// method per operation, named by its operationId (CreatePackage, FinalizePackage, …),
// and one Go type per schema. The gateway answers with those types too
// (services/gateway/internal/transport/httpapi), so a field of an answer is declared
// once, in the document. Tests get a client through servicetest.APIClient, whose
// transport also checks every answer against the document.
package apiclient
