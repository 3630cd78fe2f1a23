// Package deploy holds no code: its tests check the deployment files beside them. Every
// manifest that `kustomize build` renders from k8s/ decodes strictly into the official
// Kubernetes API types (and the custom resources into local types of the fields
// shipfile uses), and fits the services (ports, probes, variables, secrets, sizes); the
// Grafana dashboard and the Prometheus alert rules parse, and name only metrics the
// services export; docs/OPERATIONS.md documents every metric.
package deploy
