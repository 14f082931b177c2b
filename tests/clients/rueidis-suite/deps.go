// Package rueidissuite holds no code: it pins rueidis (Redis's Go client
// with client-side caching), its lock package and its go-redis-compatible
// adapter, so that `go test -c` builds their own test suites, which
// tests/python/test_rueidis_suite.py runs against Kvasir.
package rueidissuite

import (
	_ "github.com/redis/rueidis"
	_ "github.com/redis/rueidis/rueidiscompat"
)
