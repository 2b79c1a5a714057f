<?php
function sum($a, $b) { return $a + $b; }
