return { name = "app" }
