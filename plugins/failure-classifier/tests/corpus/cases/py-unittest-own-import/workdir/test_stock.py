import unittest
from inventory.stock import total


class T(unittest.TestCase):
    def test_total(self):
        self.assertEqual(total([]), 0)
