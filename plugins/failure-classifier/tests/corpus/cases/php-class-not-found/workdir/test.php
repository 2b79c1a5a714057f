<?php
require __DIR__ . '/Calc.php';
$c = new Calc();
assert($c->add(2, 3) === 5);
