test('a', () => expect(document.title).toBe(''));
