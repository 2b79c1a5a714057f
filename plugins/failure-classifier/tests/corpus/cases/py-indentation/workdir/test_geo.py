import unittest
from geo import area


class T(unittest.TestCase):
    def test_area(self):
        self.assertEqual(area(2, 3), 6)
