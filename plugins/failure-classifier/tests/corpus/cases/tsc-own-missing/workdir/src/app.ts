import { router } from './routes';
console.log(router);
