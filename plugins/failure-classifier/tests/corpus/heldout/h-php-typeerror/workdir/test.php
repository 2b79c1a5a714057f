<?php
declare(strict_types=1);
require __DIR__ . '/calc.php';
assert(add(2, '3') === 5);
