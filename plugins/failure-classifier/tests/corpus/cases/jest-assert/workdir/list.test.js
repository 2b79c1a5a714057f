const { uniq } = require('./list');
test('uniq', () => expect(uniq([1, 1, 2])).toEqual([1, 2]));
