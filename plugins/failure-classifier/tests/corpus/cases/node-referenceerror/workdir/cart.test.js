const test = require('node:test');
const assert = require('node:assert');
const { total } = require('./cart');
test('total', () => { assert.equal(total([1]), 1); });
