import unittest
import m

class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(m.a(), 1)
    def test_b(self):
        self.assertEqual(m.b(), 1)
    def test_c(self):
        self.assertEqual(m.c(), 1)
