const test = require('node:test');
const assert = require('node:assert');
const { valid } = require('./v');
test('short', () => { assert.strictEqual(valid('abc'), true); });
