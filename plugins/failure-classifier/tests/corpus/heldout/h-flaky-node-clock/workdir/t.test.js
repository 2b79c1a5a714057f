const test = require('node:test');
const assert = require('node:assert');
test('even ms', () => { assert.strictEqual(Date.now() % 2, 0); });
