local config = { db = { host = "localhost" } }
print(config.cache.size)
