<?php
require __DIR__ . '/vendor/autoload.php';
require __DIR__ . '/calc.php';
assert(add(2, 3) === 5);
