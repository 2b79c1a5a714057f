<?php
require __DIR__ . '/thumb.php';
assert(thumb() !== false);
