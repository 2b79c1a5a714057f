const test = require('node:test');
const assert = require('node:assert');
test('a', () => { assert.deepStrictEqual([1, 2], [2, 1]); });
