import random, time

def test_fast_enough():
    start = time.perf_counter()
    time.sleep(random.choice([0.0, 0.0, 0.05]))
    assert time.perf_counter() - start < 0.03, 'too slow'
