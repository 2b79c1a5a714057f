import unittest

class T(unittest.TestCase):
    def setUp(self):
        self.rows = open('rows.csv').read().split()
    def test_count(self):
        self.assertEqual(len(self.rows), 2)
