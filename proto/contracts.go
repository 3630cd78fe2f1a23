// Package proto holds shipfile's contracts: the OpenAPI document of the REST API
// (openapi.yaml) and the protobuf schemas of the events on the bus (events/v1).
package proto

import _ "embed"

// OpenAPI is the REST API's OpenAPI 3 document, in YAML.
//
//go:embed openapi.yaml
var OpenAPI []byte
