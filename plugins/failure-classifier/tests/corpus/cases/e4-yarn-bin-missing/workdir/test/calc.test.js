const test = require('ava');
test('adds', (t) => t.is(1 + 1, 2));
