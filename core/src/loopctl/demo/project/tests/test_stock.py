import unittest

from inventory.stock import slug, stock_value, total_units

ITEMS = [
    {"name": "Blue Widget", "qty": 3, "price": 2.5},
    {"name": "Red Gadget", "qty": 2, "price": 10.0},
]


class StockTests(unittest.TestCase):
    def test_total_units(self):
        self.assertEqual(total_units(ITEMS), 5)

    def test_stock_value(self):
        self.assertEqual(stock_value(ITEMS), 27.5)

    def test_slug(self):
        self.assertEqual(slug("Blue  Widget!"), "blue-widget")


if __name__ == "__main__":
    unittest.main()
