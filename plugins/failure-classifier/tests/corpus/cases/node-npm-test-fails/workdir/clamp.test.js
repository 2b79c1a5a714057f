const test = require('node:test');
const assert = require('node:assert');
const { clamp } = require('./clamp');
test('clamp', () => { assert.strictEqual(clamp(9, 0, 5), 5); });
