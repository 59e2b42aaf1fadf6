# The fixture needs nothing beyond the standard library, so it uses unittest, not pytest.
# ruff: noqa: PT009, PT027
import unittest

from stats import mean, median


class MeanTest(unittest.TestCase):
    def test_mean(self) -> None:
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_mean_empty(self) -> None:
        with self.assertRaises(ValueError):
            mean([])


class MedianTest(unittest.TestCase):
    def test_median_odd(self) -> None:
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_even(self) -> None:
        self.assertEqual(median([4, 1, 3, 2]), 3)

    def test_median_empty(self) -> None:
        with self.assertRaises(ValueError):
            median([])


if __name__ == "__main__":
    unittest.main()
