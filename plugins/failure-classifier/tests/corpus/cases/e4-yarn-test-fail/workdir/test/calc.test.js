const test = require('node:test');
const assert = require('node:assert');
const { half } = require('../src/calc');
test('half', () => assert.strictEqual(half(8), 4));
