module kvasir/tests/clients/redigo-suite

go 1.22

require github.com/gomodule/redigo v1.9.3

// redigo's own tests import these: listed so that `go mod download`
// fetches them for `go test -c github.com/gomodule/redigo/redis`.
require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.8.4 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
