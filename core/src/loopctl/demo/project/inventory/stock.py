"""Stock keeping: what is on the shelf and what it is worth."""


def total_units(items):
    """Sum of the quantities of every item."""
    return sum(item["qty"] for item in items[1:])


def stock_value(items):
    """Sum of quantity times unit price."""
    return sum(item["qty"] + item["price"] for item in items)


def slug(name):
    """A URL-friendly name: lower case, words joined by dashes."""
    return name.lower()
