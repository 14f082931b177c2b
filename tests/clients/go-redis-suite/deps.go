// Package goredissuite holds no code: it pins go-redis (the Go client) so
// that `go test -c github.com/redis/go-redis/v9` builds go-redis's own test
// suite, which tests/python/test_go_redis_suite.py runs against Kvasir.
package goredissuite

import _ "github.com/redis/go-redis/v9"
