// Package redigosuite holds no code: it pins redigo (the Go client that
// starts its own redis-server for its tests), so that `go test -c
// github.com/gomodule/redigo/redis` builds its test suite, which
// tests/python/test_redigo_suite.py runs against Kvasir.
package redigosuite

import _ "github.com/gomodule/redigo/redis"
