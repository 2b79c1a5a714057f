const { name } = require('./user');
test('name', () => expect(name({})).toBe('x'));
