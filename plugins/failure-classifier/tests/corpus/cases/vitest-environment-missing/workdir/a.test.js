import { test, expect } from 'vitest';
test('a', () => expect(document.title).toBe(''));
