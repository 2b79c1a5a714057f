import calc

assert calc.add(2, 3) == 5, 'add(2, 3) != 5'
