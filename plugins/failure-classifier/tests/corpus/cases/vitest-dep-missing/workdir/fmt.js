import dayjs from 'dayjs';
export const day = (d) => dayjs(d).format('D');
