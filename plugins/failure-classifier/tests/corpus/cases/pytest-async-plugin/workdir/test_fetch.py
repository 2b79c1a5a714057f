import asyncio

async def fetch():
    await asyncio.sleep(0)
    return 1

async def test_fetch():
    assert await fetch() == 1
