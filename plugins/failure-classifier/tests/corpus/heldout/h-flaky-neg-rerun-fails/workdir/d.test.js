const test = require('node:test');
const assert = require('node:assert');
test('d', () => { assert.strictEqual([3, 1].sort()[0], 3); });
