"""What a project's tests do with pytest-redis: its `redis_proc` fixture
starts `redis-server` (here Kvasir, through --redis-exec) with
pytest-redis' command line (a pidfile, a logfile, a Unix socket, save
points...), and `redisdb` hands each test a client on that Unix socket and
empties the server after it."""

from pytest_redis import factories

# A second server with its own settings, as projects declare them.
redis_proc_auth = factories.redis_proc(port=None, password="s3cret", db_count=4, save="900 1")
redisdb_auth = factories.redisdb("redis_proc_auth")


def test_data_types_through_the_unix_socket(redisdb):
    redisdb.set("k", "v")
    assert redisdb.get("k") == b"v"
    redisdb.rpush("l", 1, 2, 3)
    assert redisdb.lrange("l", 0, -1) == [b"1", b"2", b"3"]
    redisdb.hset("h", mapping={"a": 1, "b": 2})
    assert redisdb.hgetall("h") == {b"a": b"1", b"b": b"2"}
    redisdb.zadd("z", {"x": 2, "y": 1})
    assert redisdb.zrange("z", 0, -1) == [b"y", b"x"]
    client = redisdb.client_list()[0]
    assert client["addr"].endswith(".sock:0")
    assert "U" in client["flags"]


def test_each_test_starts_empty(redisdb):
    assert redisdb.dbsize() == 0
    redisdb.set("left", "behind")


def test_scripts_pipelines_and_transactions(redisdb):
    incr_by = redisdb.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert incr_by(keys=["n"], args=[5]) == 5
    with redisdb.pipeline(transaction=True) as pipe:
        pipe.incr("n").get("n")
        assert pipe.execute() == [6, b"6"]


def test_the_process_fixture(redis_proc, redisdb):
    assert redis_proc.running()
    assert redis_proc.version.major == 7
    info = redisdb.info("server")
    assert info["tcp_port"] == redis_proc.port
    config = redisdb.config_get("*")
    assert config["unixsocket"] == redis_proc.unixsocket
    assert config["logfile"].endswith(".log")
    assert config["pidfile"].endswith(".pid")
    with open(config["pidfile"]) as f:
        assert int(f.read()) == info["process_id"]


def test_a_server_with_a_password(redisdb_auth):
    redisdb_auth.select(3)
    redisdb_auth.set("k", "v")
    assert redisdb_auth.get("k") == b"v"
    assert redisdb_auth.config_get("databases")["databases"] == "4"
    assert redisdb_auth.config_get("save")["save"] == "900 1"


def test_keyspace_is_shared_between_clients(redisdb, redis_proc):
    import redis

    other = redis.Redis(host=redis_proc.host, port=redis_proc.port)
    other.set("from-tcp", "1")
    assert redisdb.get("from-tcp") == b"1"
