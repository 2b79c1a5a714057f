import { z } from '@zod-heldout/core';
console.log(z);
