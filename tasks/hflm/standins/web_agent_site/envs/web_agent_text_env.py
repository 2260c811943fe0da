"""Upstream's WebAgentTextEnv, SimServer and SimBrowser (web_agent_site/envs/web_agent_text_env.py) over Pages.

The same constructor (observation_mode, file_path, server, and the kwargs num_products, human_goals, filter_goals,
limit_goals, session, session_prefix, show_attrs), the same reset(session, instruction_text) -> (obs, None), step(action)
-> (state, reward, done, None), get_available_actions() -> {"has_search_bar", "clickables"}, get_instruction_text(),
the server's goals (shuffled with random.seed(233)), user sessions and page transitions (search, results pages with
Next > / < Prev, item pages with options, Description / Features / Reviews, Back to Search, Buy Now and its reward).
Observation modes "text" (upstream's simple mode: the page's texts joined by " [SEP] ") and "url"; "html" and
"text_rich" need upstream's templates and are refused.
"""

import json
import random
import string
from collections import defaultdict

import numpy as np

from web_agent_site.engine.engine import (ACTION_TO_TEMPLATE, BACK_TO_SEARCH, END_BUTTON, NEXT_PAGE, PREV_PAGE,
                                          get_product_per_page, get_top_n_product_from_keywords, init_search_engine,
                                          load_products, map_action_to_html, parse_action)
from web_agent_site.engine.goal import get_goals, get_reward
from web_agent_site.utils import DEFAULT_FILE_PATH, random_idx

OBSERVATION_MODES = ("text", "url")


class WebAgentTextEnv:
    """Gym environment for Text mode of WebShop environment (upstream's, without gym's base class)."""

    def __init__(self, observation_mode='html', file_path=DEFAULT_FILE_PATH, server=None, **kwargs):
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(f"observation_mode {observation_mode!r}: the web_agent_site stand-in renders no HTML; use "
                             "'text' (or 'url'), or install princeton-nlp/WebShop for the others")
        if kwargs.get('get_image', 0):
            raise ValueError("get_image needs upstream's image features (feat_conv.pt): the stand-in has none")
        self.observation_mode = observation_mode
        self.kwargs = kwargs
        self.file_path = file_path
        self.base_url = 'http://127.0.0.1:3000'
        self.server = SimServer(
            self.base_url, self.file_path, self.kwargs.get('filter_goals'), self.kwargs.get('limit_goals', -1),
            self.kwargs.get('num_products'), self.kwargs.get('human_goals'), self.kwargs.get('show_attrs', False),
        ) if server is None else server
        self.browser = SimBrowser(self.server)
        self.session = self.kwargs.get('session')
        self.session_prefix = self.kwargs.get('session_prefix')
        self.prev_obs = []
        self.prev_actions = []
        self.num_prev_obs = self.kwargs.get('num_prev_obs', 0)
        self.num_prev_actions = self.kwargs.get('num_prev_actions', 0)
        self.reset()

    def step(self, action):
        """search[keywords] or click[value]; anything else changes nothing. -> (observation, reward, done, None)."""
        self.get_available_actions()
        action_name, action_arg = parse_action(action)
        if action_arg is not None:
            action_arg = action_arg.lower()
        if action_name == 'search' and action_arg is not None and action_arg != '':
            status = self.browser.search(action_arg)
        elif action_name == 'click' and action_arg in self.text_to_clickable and action_arg != 'search':
            status = self.browser.click(action_arg, self.text_to_clickable)
        else:
            status = dict(reward=0, done=False)
        ob = self.observation
        text_list = [ob]
        self.prev_actions.append(action)
        for i in range(1, 1 + max(self.num_prev_obs, self.num_prev_actions)):
            if len(self.prev_actions) >= i and self.num_prev_actions >= i:
                text_list.append(self.prev_actions[-i])
            if len(self.prev_obs) >= i and self.num_prev_obs >= i:
                text_list.append(self.prev_obs[-i])
        state = ' [SEP] '.join(text_list[::-1])
        self.prev_obs.append(ob)
        return state, status['reward'], status['done'], None

    def get_available_actions(self):
        """{"has_search_bar": bool, "clickables": [texts]}: the page's buttons and product links lower-cased, then its
        options, as upstream's text_to_clickable keys them."""
        page = self.state['html']
        self.text_to_clickable = dict(page.clickables)
        return dict(has_search_bar=page.has_search_bar, clickables=list(self.text_to_clickable.keys()))

    def get_instruction_text(self):
        """The instruction as upstream reads it from the page's instruction heading: "Instruction: <text>"."""
        return f"Instruction: {self.instruction_text_of_page()}"

    def instruction_text_of_page(self):
        texts = self.browser.page_source.texts
        return texts[texts.index("Instruction:") + 1]

    @property
    def observation(self):
        if self.observation_mode == 'text':
            return ' [SEP] '.join(t.strip() for t in self.state['html'].texts)
        return self.state['url']

    @property
    def state(self):
        return dict(url=self.browser.current_url, html=self.browser.page_source, instruction_text=self.instruction_text)

    def reset(self, session=None, instruction_text=None):
        """A new session: the goal of index `session` when it is an int (else weighted at random); -> (obs, None)."""
        session_int = None
        if session is not None:
            self.session = str(session)
            if isinstance(session, int):
                session_int = session
        else:
            self.session = ''.join(random.choices(string.ascii_lowercase, k=10))
        if self.session_prefix is not None:
            self.session = self.session_prefix + self.session
        self.browser.get(f'{self.base_url}/{self.session}', session_id=self.session, session_int=session_int)
        self.text_to_clickable = None
        self.instruction_text = self.get_instruction_text() if instruction_text is None else instruction_text
        obs = self.observation
        self.prev_obs = [obs]
        self.prev_actions = []
        return obs, None

    def render(self, mode='human'):
        pass

    def close(self):
        pass


class SimServer:
    """Upstream's simulated WebShop server: products, search engine, goals, sessions and page transitions."""

    def __init__(self, base_url, file_path, filter_goals=None, limit_goals=-1, num_products=None, human_goals=0,
                 show_attrs=False):
        self.base_url = base_url
        self.all_products, self.product_item_dict, self.product_prices, _ = load_products(
            filepath=file_path, num_products=num_products, human_goals=human_goals)
        self.search_engine = init_search_engine(num_products=num_products)
        self.goals = get_goals(self.all_products, self.product_prices, human_goals)
        self.show_attrs = show_attrs
        random.seed(233)  # upstream fixes the goals' shuffle
        random.shuffle(self.goals)
        if filter_goals is not None:
            self.goals = [goal for (i, goal) in enumerate(self.goals) if filter_goals(i, goal)]
        if limit_goals != -1 and limit_goals < len(self.goals):
            self.weights = [goal['weight'] for goal in self.goals]
            self.cum_weights = [0] + np.cumsum(self.weights).tolist()
            idxs = []
            while len(idxs) < limit_goals:
                idx = random_idx(self.cum_weights)
                if idx not in idxs:
                    idxs.append(idx)
            self.goals = [self.goals[i] for i in idxs]
        self.weights = [goal['weight'] for goal in self.goals]
        self.cum_weights = [0] + np.cumsum(self.weights).tolist()
        self.user_sessions = dict()
        self.assigned_instruction_text = None

    def index(self, session_id, **kwargs):
        return map_action_to_html('start', session_id=session_id, instruction_text=kwargs['instruction_text']), \
            f'{self.base_url}/{session_id}'

    def search_results(self, session_id, **kwargs):
        session = self.user_sessions[session_id]
        keywords = kwargs['keywords']
        assert isinstance(keywords, list)
        page = kwargs.get('page', 1)
        session["page"], session["keywords"] = page, keywords
        session["actions"]["search"] += 1
        session["asin"], session["options"] = None, {}
        top_n_products = get_top_n_product_from_keywords(keywords, self.search_engine, self.all_products,
                                                         self.product_item_dict)
        products = get_product_per_page(top_n_products, page)
        url = f"{self.base_url}/search_results/{session_id}/{'+'.join(keywords)}/{page}"
        html = map_action_to_html('search', session_id=session_id, products=products, keywords=keywords, page=page,
                                  total=len(top_n_products), instruction_text=session["goal"]["instruction_text"])
        return html, url

    def item_page(self, session_id, **kwargs):
        session = self.user_sessions[session_id]
        clickable_name = kwargs['clickable_name']
        clickable = kwargs['text_to_clickable'][clickable_name]
        if clickable['kind'] == 'product-link':
            session["asin"] = clickable_name.upper()
            session["actions"]["asin"] += 1
            session["asins"].add(session["asin"])
        elif clickable.get('name') is not None:
            session["options"][clickable['name'].lower()] = clickable_name
            session["actions"]["options"] += 1
        product_info = self.product_item_dict[session["asin"]]
        url = (f"{self.base_url}/item_page/{session_id}/{session['asin']}/{'+'.join(session['keywords'])}/"
               f"{session['page']}/{json.dumps(session['options'])}")
        html = map_action_to_html('click', session_id=session_id, product_info=product_info,
                                  keywords=session["keywords"], page=session["page"], asin=session["asin"],
                                  options=session["options"], instruction_text=session["goal"]["instruction_text"],
                                  show_attrs=self.show_attrs)
        return html, url

    def item_sub_page(self, session_id, **kwargs):
        session = self.user_sessions[session_id]
        clickable_name = kwargs['clickable_name']
        for k in ACTION_TO_TEMPLATE:
            if clickable_name.lower() == k.lower():
                clickable_name = k
                break
        product_info = self.product_item_dict[session["asin"]]
        session["actions"][clickable_name] += 1
        url = (f"{self.base_url}/item_sub_page/{session_id}/{session['asin']}/{'+'.join(session['keywords'])}/"
               f"{session['page']}/{clickable_name}/{session['options']}")
        html = map_action_to_html(f'click[{clickable_name}]', session_id=session_id, product_info=product_info,
                                  keywords=session["keywords"], page=session["page"], asin=session["asin"],
                                  options=session["options"], instruction_text=session["goal"]["instruction_text"])
        return html, url

    def done(self, session_id, **kwargs):
        session = self.user_sessions[session_id]
        goal = session['goal']
        purchased_product = self.product_item_dict[session["asin"]]
        session["actions"]["purchase"] += 1
        price = self.product_prices.get(session["asin"])
        reward, info = get_reward(purchased_product, goal, price=price, options=session["options"], verbose=True)
        session['verbose_info'], session['done'], session['reward'] = info, True, reward
        url = f"{self.base_url}/done/{session_id}/{session['asin']}/{session['options']}"
        html = map_action_to_html(f'click[{END_BUTTON}]', session_id=session_id, reward=reward, asin=session["asin"],
                                  options=session["options"], instruction_text=goal["instruction_text"])
        return html, url, reward

    def receive(self, session_id, current_url, session_int=None, **kwargs):
        """Maps an action to its page: (page, url, {"reward", "done"})."""
        status = dict(reward=0.0, done=False)
        if session_id not in self.user_sessions:
            idx = session_int if isinstance(session_int, int) else random_idx(self.cum_weights)
            goal = self.goals[idx]
            instruction_text = goal['instruction_text']
            self.user_sessions[session_id] = {'goal': goal, 'done': False}
        else:
            instruction_text = self.user_sessions[session_id]['goal']['instruction_text']
        if self.assigned_instruction_text is not None:
            instruction_text = self.assigned_instruction_text
            self.user_sessions[session_id]['goal']['instruction_text'] = instruction_text
        session = self.user_sessions[session_id]
        if not kwargs:
            kwargs['instruction_text'] = instruction_text
            html, url = self.index(session_id, **kwargs)
            session.update({'keywords': None, 'page': None, 'asin': None, 'asins': set(), 'options': dict(),
                            'actions': defaultdict(int)})
        elif 'keywords' in kwargs:
            html, url = self.search_results(session_id, **kwargs)
        elif 'clickable_name' in kwargs:
            clickable_name = kwargs['clickable_name'].lower()
            page_name = self.get_page_name(current_url)
            if clickable_name == END_BUTTON.lower():
                html, url, reward = self.done(session_id, **kwargs)
                status['reward'], status['done'] = reward, True
            elif clickable_name == BACK_TO_SEARCH.lower():
                html, url, status = self.receive(session_id, current_url)
            elif clickable_name == NEXT_PAGE.lower() and page_name == 'search_results':
                html, url, status = self.receive(session_id, current_url, keywords=session["keywords"],
                                                 page=session["page"] + 1)
            elif clickable_name == PREV_PAGE.lower() and page_name == 'search_results':
                html, url, status = self.receive(session_id, current_url, keywords=session["keywords"],
                                                 page=session["page"] - 1)
            elif clickable_name == PREV_PAGE.lower() and page_name == 'item_sub_page':
                html, url = self.item_page(session_id, **kwargs)
            elif clickable_name == PREV_PAGE.lower() and page_name == 'item_page':
                html, url = self.search_results(session_id, keywords=session["keywords"], page=session["page"], **kwargs)
            elif clickable_name in [k.lower() for k in ACTION_TO_TEMPLATE]:
                html, url = self.item_sub_page(session_id, **kwargs)
            else:
                html, url = self.item_page(session_id, **kwargs)
        return html, url, status

    def get_page_name(self, url):
        if url is None:
            return None
        for page_name in ('search_results', 'item_page', 'item_sub_page', 'done'):
            if page_name in url:
                return page_name
        return ''


class SimBrowser:
    """Upstream's simulated browser: the current page and url of one session."""

    def __init__(self, server):
        self.server = server
        self.current_url = None
        self.page_source = None
        self.session_id = None

    def get(self, url, session_id=None, session_int=None):
        self.session_id = url.split('/')[-1] if session_id is None else session_id
        self.page_source, _, _ = self.server.receive(self.session_id, self.current_url, session_int=session_int)
        self.current_url = url

    def click(self, clickable_name, text_to_clickable):
        self.page_source, self.current_url, status = self.server.receive(
            self.session_id, current_url=self.current_url, clickable_name=clickable_name,
            text_to_clickable=text_to_clickable)
        return status

    def search(self, keywords):
        if isinstance(keywords, str):
            keywords = keywords.split(' ')
        self.page_source, self.current_url, status = self.server.receive(
            self.session_id, current_url=self.current_url, keywords=keywords)
        return status
