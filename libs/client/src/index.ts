export { CREATING_OPERATIONS } from './operations';
