const test = require('node:test');
const assert = require('node:assert');
const { withTax } = require('./price');
test('tax', () => { assert.strictEqual(withTax(10), 12); });
