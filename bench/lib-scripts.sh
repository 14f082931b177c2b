# The two EVALSHA benchmark scripts (sourced by vs-redis-commands.sh and
# scripts-ab.sh, so both measure the same bodies): one INCR, and ten commands
# of five data types on one key's family.
INCR_SCRIPT="return redis.call('INCR', KEYS[1])"
TEN_SCRIPT="local k = KEYS[1]
redis.call('SET', k, ARGV[1])
redis.call('GET', k)
redis.call('INCR', k .. ':n')
redis.call('HSET', k .. ':h', 'f', ARGV[1])
redis.call('HGET', k .. ':h', 'f')
redis.call('LPUSH', k .. ':l', ARGV[1])
redis.call('LPOP', k .. ':l')
redis.call('SADD', k .. ':s', ARGV[1])
redis.call('SISMEMBER', k .. ':s', ARGV[1])
return redis.call('EXISTS', k)"
