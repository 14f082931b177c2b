module kvasir/tests/clients/go-redis-suite

go 1.26.0

require github.com/redis/go-redis/v9 v9.23.0

require (
	github.com/bsm/ginkgo/v2 v2.12.0 // indirect
	github.com/bsm/gomega v1.27.10 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
