const test = require('node:test');
const assert = require('node:assert');
const { withdraw } = require('./acct');
test('withdraw', () => { assert.strictEqual(withdraw(5, 10), 0); });
