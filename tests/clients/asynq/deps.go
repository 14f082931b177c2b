// Package asynqsuite holds no code: it pins asynq (a Go job queue over
// Redis scripts) so that `go test github.com/hibiken/asynq/internal/rdb`
// runs asynq's own storage test suite against Kvasir
// (tests/python/test_frameworks.py::test_asynq_own_suite_*).
package asynqsuite

import _ "github.com/hibiken/asynq"
