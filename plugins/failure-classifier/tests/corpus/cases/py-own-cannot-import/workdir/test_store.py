from store.models import Item, Order


def test_order():
    assert Order
