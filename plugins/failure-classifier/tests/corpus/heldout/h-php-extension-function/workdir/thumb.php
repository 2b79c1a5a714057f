<?php
function thumb() { return imagecreatetruecolor(10, 10); }
