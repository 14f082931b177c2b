module kvasir/tests/clients/redigo-suite

go 1.22

require github.com/gomodule/redigo v1.9.3
