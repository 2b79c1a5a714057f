import feedparser_nonexistent_xyz


def test_feed():
    assert feedparser_nonexistent_xyz
